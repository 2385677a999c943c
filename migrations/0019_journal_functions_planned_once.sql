-- The journal's helpers become PL/pgSQL (docs/design.md, "The order journal"). A SQL-language
-- function that is not inlined is parsed and planned again on every call, and these run inside
-- the triggers of every payment, status change and callback: a profile of the payment path
-- showed PostgreSQL parsing (base_yyparse, pg_strtok) among its busiest work. PL/pgSQL keeps
-- each statement's plan for the session. What they do is unchanged.
CREATE OR REPLACE FUNCTION journal_write(p_order uuid, p_kind text, p_summary text, p_payment uuid,
                                         p_charge text, p_event uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_order IS NOT NULL THEN
        INSERT INTO order_journal (order_id, kind, summary, payment_id, charge_id, event_id)
        VALUES (p_order, p_kind, p_summary, p_payment, p_charge, p_event);
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION journal_order_of_payment(p_payment text, p_charge text) RETURNS uuid
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN coalesce(
        (SELECT order_id FROM payments
          WHERE p_payment ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
            AND id = p_payment::uuid),
        (SELECT order_id FROM payments WHERE provider_charge_id = p_charge));
END
$$;
