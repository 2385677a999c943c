# PostgreSQL 15 for docker-compose.yml: Debian's own packages on debian:bookworm-slim, with
# a small entry point (postgres-entrypoint) that reads the same variables as the official
# image's (POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_HOST_AUTH_METHOD, POSTGRES_DB) at the
# first start. The repository builds it rather than pulling postgres:15, so that what
# scripts/compose-check runs is what a user runs.
FROM debian:bookworm-slim
# Debian's package would create a cluster of its own at install; the entry point makes the
# one the container runs.
RUN mkdir -p /etc/postgresql-common/createcluster.d \
 && echo 'create_main_cluster = false' >/etc/postgresql-common/createcluster.d/once.conf \
 && apt-get update \
 && apt-get install -y --no-install-recommends postgresql-15 gosu \
 && rm -rf /var/lib/apt/lists/*
ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 PGDATA=/var/lib/postgresql/data
COPY postgres-entrypoint /usr/local/bin/postgres-entrypoint
RUN chmod 755 /usr/local/bin/postgres-entrypoint
# SIGINT: PostgreSQL's fast shutdown, as the official image stops it.
STOPSIGNAL SIGINT
EXPOSE 5432
ENTRYPOINT ["/usr/local/bin/postgres-entrypoint"]
CMD ["postgres"]
