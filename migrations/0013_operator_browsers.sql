-- Browsers an operator has logged in from (operator::browsers; docs/design.md, "The operator
-- console"). A browser that gave the right password once keeps a secret in a cookie; a
-- login that carries it is counted under that browser alone, not under its address nor
-- with every client, so no crowd of guessers can lock the operator out of a browser they do
-- not hold. Only the secret's SHA-256 is kept: a copy of this table opens nothing. A row is
-- written by the right password only, and deleted after 90 days without a login.
CREATE TABLE operator_browsers (
    secret_sha256 text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_login_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT operator_browsers_pkey PRIMARY KEY (secret_sha256),
    CONSTRAINT operator_browsers_secret_sha256_hex CHECK (secret_sha256 ~ '^[0-9a-f]{64}$')
);
