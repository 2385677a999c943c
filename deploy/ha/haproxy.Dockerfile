# HAProxy for the `ha` profile of docker-compose.yml: Debian's haproxy (2.6, the release the
# fault harness runs) on debian:bookworm-slim, built by the repository rather than pulled
# as haproxy:2.6. Its PostgreSQL check runs psql (Debian's client); socat is there to talk
# to the admin socket. The configuration, the check and the 503 page are baked in, so the
# image alone is the proxy the fault harness runs.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends haproxy postgresql-client socat \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /usr/local/etc/haproxy /run/haproxy \
 && chown haproxy:haproxy /var/lib/haproxy /run/haproxy
COPY haproxy.cfg primary-check unavailable.http /usr/local/etc/haproxy/
RUN chmod 755 /usr/local/etc/haproxy/primary-check
USER haproxy
# SIGUSR1: HAProxy's soft stop (finish what is in flight), as the official image stops it.
STOPSIGNAL SIGUSR1
# In the foreground (-db), with the master process that reloads and reaps (-W).
CMD ["haproxy", "-W", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]
