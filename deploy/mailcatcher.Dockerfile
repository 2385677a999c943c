# The mail catcher of docker-compose.yml: takes every message on SMTP port 1025 and shows
# them on http://localhost:8025 (a page, and /messages.json for programs). Debian's
# python3-aiosmtpd and the standard library on debian:bookworm-slim, built by the
# repository rather than pulled as a ready-made image.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3-aiosmtpd \
 && rm -rf /var/lib/apt/lists/*
COPY mailcatcher.py /usr/local/bin/mailcatcher
RUN chmod 755 /usr/local/bin/mailcatcher
USER nobody
EXPOSE 1025 8025
CMD ["/usr/local/bin/mailcatcher"]
