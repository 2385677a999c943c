-- pgbench (-M prepared): the one statement a replay costs the server, store::read_first
-- (does the session exist, and what does the key hold), on the key the server completed
-- (variables sid and key come from scripts/bench with -D).
SELECT EXISTS (SELECT 1 FROM tower_sessions.session s
                 WHERE s.id = :sid AND s.expiry_date > now()) AS session_known,
       k.route, k.fingerprint, k.state, coalesce(k.locked_until > now(), false) AS lease_valid,
       k.response_status, k.response_headers, k.response_body
  FROM (VALUES (1)) AS one (n)
  LEFT JOIN idempotency_keys k ON k.scope = :sid AND k.key = :key;
