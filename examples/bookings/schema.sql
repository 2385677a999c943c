-- The example's own table: one booking per room and night in each hotel (an API key), cancelled
-- at most once.
CREATE TABLE IF NOT EXISTS bookings (
    id           uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    owner        text        NOT NULL,
    room         integer     NOT NULL,
    night        date        NOT NULL,
    guest        text        NOT NULL,
    cancelled_at timestamptz,
    reason       text,
    CONSTRAINT bookings_room_night_key UNIQUE (owner, room, night),
    CONSTRAINT bookings_room_positive CHECK (room > 0)
);
