-- Who is buying and where the parcel goes (docs/protocol.md, "The shopper's details";
-- docs/operations.md, "Personal data").

-- The details as the shopper types them at the checkout, kept with the cart so that a reload
-- keeps them. They go with the cart (an ordered cart is dropped), and a cart left alone
-- forgets them after the personal data's draft retention (server/src/retention.rs).
ALTER TABLE carts
    ADD COLUMN details          jsonb,
    ADD COLUMN details_saved_at timestamptz,
    ADD CONSTRAINT carts_details_size CHECK (details IS NULL OR octet_length(details::text) <= 8192);
CREATE INDEX carts_details_saved_at_idx ON carts (details_saved_at) WHERE details IS NOT NULL;

-- The order's recipient, beside the order rather than in it: forgetting the person deletes
-- this row and keeps the order's books (its lines, amounts and statuses).
CREATE TABLE order_recipients (
    order_id    uuid NOT NULL,
    email       text NOT NULL,
    name        text NOT NULL,
    line1       text NOT NULL,
    line2       text NOT NULL DEFAULT '',
    postal_code text NOT NULL,
    city        text NOT NULL,
    country     text NOT NULL,
    CONSTRAINT order_recipients_pkey PRIMARY KEY (order_id),
    CONSTRAINT order_recipients_order_fk FOREIGN KEY (order_id) REFERENCES orders (id) ON DELETE CASCADE,
    CONSTRAINT order_recipients_email_length CHECK (char_length(email) BETWEEN 3 AND 254),
    CONSTRAINT order_recipients_lines_length CHECK (
        char_length(name) BETWEEN 1 AND 100 AND char_length(line1) BETWEEN 1 AND 100
        AND char_length(line2) <= 100 AND char_length(city) BETWEEN 1 AND 100
        AND char_length(postal_code) BETWEEN 1 AND 16),
    CONSTRAINT order_recipients_country_code CHECK (country ~ '^[A-Z]{2}$')
);
-- The recipient as every reader of the shop takes it: the email, and the address as one object
-- (domain::details::ShippingAddress).
CREATE VIEW order_recipients_shown AS
SELECT order_id, email,
       jsonb_build_object('name', name, 'line1', line1, 'line2', line2,
                         'postal_code', postal_code, 'city', city, 'country', country) AS shipping_address
  FROM order_recipients;
-- The operator's search by email, whatever its case.
CREATE INDEX order_recipients_email_idx ON order_recipients (lower(email));

-- When the order's personal data was forgotten (its recipient deleted, its emails emptied).
ALTER TABLE orders ADD COLUMN personal_data_forgotten_at timestamptz;
-- The purge's search: finished orders that still hold a person.
CREATE INDEX orders_finished_with_person_idx ON orders (updated_at)
    WHERE personal_data_forgotten_at IS NULL AND status IN ('fulfilled', 'cancelled');
