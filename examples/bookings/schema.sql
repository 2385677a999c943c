-- The example's own table: one booking per room and night in each hotel (an API key) while
-- it stands, cancelled at most once; a cancelled night can be booked again.
CREATE TABLE IF NOT EXISTS bookings (
    id           uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    owner        text        NOT NULL,
    room         integer     NOT NULL,
    night        date        NOT NULL,
    guest        text        NOT NULL,
    cancelled_at timestamptz,
    reason       text,
    CONSTRAINT bookings_room_positive CHECK (room > 0),
    CONSTRAINT bookings_guest_length CHECK (char_length(guest) BETWEEN 1 AND 200)
);
CREATE UNIQUE INDEX IF NOT EXISTS bookings_room_night_key
    ON bookings (owner, room, night) WHERE cancelled_at IS NULL;
