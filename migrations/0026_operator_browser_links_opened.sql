-- A link from `server operator-browser` lets in one browser, by a press of its button, not
-- by being fetched (docs/design.md, "The operator console"). The row a link writes names the
-- link's digest; until a browser takes the link its secret is the link's own, which is
-- no browser's (a cookie set to it by hand counts for nothing); the browser that takes it
-- gets a secret of its own, and the row keeps the link's digest, so that the same browser
-- opening the link again (before or after its login) is told nothing alarming.
ALTER TABLE operator_browsers ADD COLUMN link_sha256 text
    CONSTRAINT operator_browsers_link_sha256_len CHECK (length(link_sha256) = 64);

-- Links made before this migration name no digest and could no longer be taken: forgotten
-- (each was good for 15 minutes at most; `server operator-browser` makes a new one).
DELETE FROM operator_browsers WHERE unused_until IS NOT NULL;
