# NATS for docker-compose.yml: Debian's nats-server (2.9, the release the compose file was
# written for) on debian:bookworm-slim, built by the repository rather than pulled as
# nats:2.9. The command line is the one the official image takes; the compose file passes
# the flags.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends nats-server \
 && rm -rf /var/lib/apt/lists/*
EXPOSE 4222 6222 8222
ENTRYPOINT ["/usr/sbin/nats-server"]
CMD ["-js", "-sd", "/data", "-m", "8222"]
