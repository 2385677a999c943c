# Payments through Stripe's API, sourced by scripts/bench after the sandbox's (its run, db
# prefix, secrets and rows): a second server with PAYMENT_PROVIDER=stripe, on a database of
# its own, pays BENCH_STRIPE_PAYMENTS (200) orders through localstripe (scripts/setup installs
# it). localstripe is a Python fake that slows as it fills: the figure says what the shop's
# two-step path costs against it, beside the sandbox's, not what Stripe would answer.
stripe_payments="${BENCH_STRIPE_PAYMENTS:-200}"
stripe_port="${BENCH_STRIPE_PORT:-3953}"
stripe_shop_port="${BENCH_STRIPE_SHOP_PORT:-3954}"
stripe_db="once_bench_stripe_$run"
stripe_secret=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
/opt/localstripe/bin/localstripe --port "$stripe_port" --from-scratch >/dev/null 2>&1 &
stripe_fake=$!
DATABASE_URL="$ONCE_PG_URL/$stripe_db" LEPTOS_SITE_ADDR="127.0.0.1:$stripe_shop_port" LEPTOS_SITE_ROOT=target/site \
  PAYMENT_PROVIDER=stripe STRIPE_API_BASE="http://127.0.0.1:$stripe_port" STRIPE_SECRET_KEY=sk_test_bench \
  STRIPE_PUBLISHABLE_KEY=pk_test_bench STRIPE_JS_URL="http://127.0.0.1:$stripe_port/js.stripe.com/v3/" \
  STRIPE_WEBHOOK_SECRETS="$stripe_secret" IDEMPOTENCY_FINGERPRINT_SECRETS="$fingerprint_secret" \
  OPERATOR_PASSWORD="$operator_password" RUN_WORKERS=none RUST_LOG=warn \
  RATE_LIMIT_PER_CLIENT=1000000000 RATE_LIMIT_PER_CLIENT_BURST=1000000000 \
  RATE_LIMIT_WRITES_PER_SESSION=1000000000 RATE_LIMIT_WRITES_PER_SESSION_BURST=1000000000 \
  QUOTA_PENDING_ORDERS=0 QUOTA_PENDING_ORDERS_PER_CLIENT=0 QUOTA_ORDERS_PER_CLIENT_PER_HOUR=0 NEW_SESSIONS_PER_CLIENT_PER_HOUR=0 \
  QUOTA_KEYS_PER_HOUR=0 target/release/server &
stripe_shop=$!
for _ in $(seq 300); do
  curl -sf "http://127.0.0.1:$stripe_shop_port/healthz" >/dev/null \
    && curl -s -o /dev/null -H 'Authorization: Bearer sk_test_bench' "http://127.0.0.1:$stripe_port/v1/events" && break
  sleep 0.1
done
curl -s -o /dev/null -H 'Authorization: Bearer sk_test_bench' \
  -d "url=http://127.0.0.1:$stripe_shop_port/webhooks/stripe" -d "secret=$stripe_secret" \
  -d 'events[]=payment_intent.succeeded' "http://127.0.0.1:$stripe_port/_config/webhooks/once"
echo "  paying $stripe_payments orders through Stripe's API (localstripe)"
out=$(BENCH_PAY_BODY='{"payment_method":"pm_card_visa"}' BENCH_CPU_PIDS="server=$stripe_shop localstripe=$stripe_fake" \
  node scripts/bench.mjs "http://127.0.0.1:$stripe_shop_port" "$stripe_payments" 16)
read -r requests seconds p50 p99 non2xx socket unexpected \
  < <(sed -n 's/^RESULT //p' <<<"$out" | tr ' ' '\n' | cut -d= -f2 | xargs)
echo "$out" | head -1
rate=$(awk -v n="$requests" -v s="$seconds" 'BEGIN { print n / s }')
rows+=("payments through Stripe's API (localstripe), 16 in flight|$(fmt "$rate" "$p50" "$p99")|-|-|-|-|$unexpected")
rows+=("payments through localstripe: CPU ms per payment|$(sed -n 's/^CPU //p' <<<"$out" | sed 's/=/ /g; s/\([0-9]\) /\1, /g')|-|-|-|-|-")
kill "$stripe_shop" "$stripe_fake" 2>/dev/null || true
wait "$stripe_shop" "$stripe_fake" 2>/dev/null || true
psql -X -q "$ONCE_PG_URL/postgres" -c "DROP DATABASE IF EXISTS \"$stripe_db\" WITH (FORCE)" || true
stripe_db=
