# PostgreSQL with pg_auto_failover, for the monitor and the two data nodes of the `ha`
# profile of docker-compose.yml: Debian's postgresql-15 and postgresql-15-auto-failover (the
# packages the fault harness runs, scripts/setup) on debian:bookworm-slim, built by the
# repository rather than pulled as a ready-made image.
FROM debian:bookworm-slim
# Debian's package would create a cluster of its own at install; pg_autoctl makes the one
# each container runs.
RUN mkdir -p /etc/postgresql-common/createcluster.d \
 && echo 'create_main_cluster = false' >/etc/postgresql-common/createcluster.d/once.conf \
 && apt-get update \
 && apt-get install -y --no-install-recommends postgresql-15 postgresql-15-auto-failover gosu \
 && rm -rf /var/lib/apt/lists/*
# pg_autoctl finds pg_ctl and the other programs on PATH, as the harness runs it; UTF-8 for
# the clusters it makes.
ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8
COPY pg-ha /usr/local/bin/pg-ha
RUN chmod 755 /usr/local/bin/pg-ha
# The keeper stops PostgreSQL itself on SIGTERM, as the harness stops it.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/pg-ha"]
CMD ["node"]
