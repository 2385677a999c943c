# PostgreSQL with pg_auto_failover, for the monitor and the two data nodes of the `ha`
# profile of docker-compose.yml. Built on the official PostgreSQL image, whose package
# sources carry the extension, rather than pulled as a ready-made pg_auto_failover image.
FROM postgres:15-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends postgresql-15-auto-failover \
 && rm -rf /var/lib/apt/lists/*
COPY pg-ha /usr/local/bin/pg-ha
RUN chmod 755 /usr/local/bin/pg-ha
# The keeper stops PostgreSQL itself on SIGTERM, as the harness stops it.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/pg-ha"]
CMD ["node"]
