# HAProxy for the `ha` profile of docker-compose.yml. Its PostgreSQL check runs psql, which
# the haproxy image lacks, so this adds Debian's client; socat is there to talk to the admin
# socket. The configuration, the check and the 503 page are baked in, so the image alone
# is the proxy the fault harness runs.
FROM haproxy:2.6
USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends postgresql-client socat \
 && rm -rf /var/lib/apt/lists/*
COPY haproxy.cfg primary-check unavailable.http /usr/local/etc/haproxy/
RUN chmod 755 /usr/local/etc/haproxy/primary-check
USER haproxy
