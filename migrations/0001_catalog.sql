-- The catalog: what the shop sells. Prices are integer minor units (cents).
CREATE TABLE products (
    sku         text PRIMARY KEY,
    name        text        NOT NULL,
    description text        NOT NULL DEFAULT '',
    price_cents bigint      NOT NULL,
    currency    text        NOT NULL DEFAULT 'EUR',
    stock       integer     NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT products_price_positive CHECK (price_cents > 0),
    CONSTRAINT products_stock_not_negative CHECK (stock >= 0),
    CONSTRAINT products_currency_iso CHECK (currency ~ '^[A-Z]{3}$')
);

INSERT INTO products (sku, name, description, price_cents, currency, stock) VALUES
    ('MUG-001',  'Stoneware mug',        'Hand-glazed, 350 ml, dishwasher safe.',      1800, 'EUR', 120),
    ('TEE-002',  'Organic cotton tee',   'Heavyweight jersey in undyed natural.',       2900, 'EUR',  80),
    ('NOTE-003', 'Dot-grid notebook',    'A5, 160 pages of 100 g/m² paper.',            1400, 'EUR', 200),
    ('BAG-004',  'Canvas tote',          'Waxed canvas with leather handles.',          4500, 'EUR',  40),
    ('PEN-005',  'Brass fountain pen',   'Solid brass body, fine steel nib.',           6200, 'EUR',  25),
    ('TEA-006',  'Single-estate tea',    '100 g of first-flush loose-leaf black tea.',  1200, 'EUR', 150),
    ('CAP-007',  'Wool cap',             'Merino rib knit, one size.',                  3400, 'EUR',  60),
    ('LAMP-008', 'Desk lamp',            'Powder-coated steel, warm LED.',              8900, 'EUR',  15);
