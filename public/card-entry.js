// With Stripe (docs/payments.md, "Going live with Stripe"): mounts Stripe.js's card field
// into the payment form's #card-element, and lets the form turn the card into a
// PaymentMethod and run the bank's step when the bank asks for one. The card goes from
// this page to Stripe; the shop receives only its id.
(function () {
  'use strict';
  var field = document.getElementById('card-element');
  if (!field) return;
  var tries = 0;
  function mount() {
    if (typeof window.Stripe !== 'function') {
      // Stripe.js loads on its own; wait for it, ten seconds at most, then say so.
      if (++tries < 200) {
        setTimeout(mount, 50);
      } else {
        field.textContent = 'The card field could not be loaded from Stripe. Please reload the page.';
        field.setAttribute('role', 'alert');
      }
      return;
    }
    var stripe = window.Stripe(field.dataset.key);
    var card = stripe.elements().create('card');
    card.mount(field);
    window.onceCardPaymentMethod = function () {
      var made = stripe.createPaymentMethod({ type: 'card', card: card }).then(function (result) {
        if (result.error || !result.paymentMethod) {
          var message = result.error && result.error.message;
          throw new Error(message || 'The card was not accepted; please check it.');
        }
        return result.paymentMethod.id;
      });
      // Stripe that never answers must not leave the Pay button waiting for good.
      var late = new Promise(function (_, fail) {
        setTimeout(function () {
          fail(new Error('Stripe did not answer in time; please try again.'));
        }, 30000);
      });
      return Promise.race([made, late]);
    };
    // 3-D Secure (docs/payments.md, "3-D Secure"): the shop says what the bank's step needs,
    // Stripe.js runs it, and the shop then reads the outcome from Stripe, never from this
    // page. Resolves with the shop's last answer, {status, body}.
    window.onceBankStep = function (orderId, paymentId) {
      var url = '/api/orders/' + orderId + '/payments/' + paymentId + '/authentication';
      // The shop asks Stripe at most once a second per payment: a 429 is asked again.
      function ask(tries) {
        tries = tries || 0;
        return fetch(url, { method: 'POST', credentials: 'same-origin' }).then(function (r) {
          if (r.status === 429 && tries < 5) {
            var wait = (Number(r.headers.get('retry-after')) || 1) * 1000;
            return new Promise(function (done) { setTimeout(done, wait); }).then(function () {
              return ask(tries + 1);
            });
          }
          return r.json().catch(function () { return {}; }).then(function (body) {
            return { status: r.status, body: body };
          });
        });
      }
      return ask().then(function (first) {
        if (first.status !== 202 || !first.body.client_secret) return first;
        // Whatever the bank answers (or an error of Stripe.js), the shop asks Stripe.
        var again = function () { return ask(); };
        return stripe.handleNextAction({ clientSecret: first.body.client_secret }).then(again, again);
      });
    };
  }
  mount();
})();
