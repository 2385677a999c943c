// With Stripe (docs/payments.md, "Going live with Stripe"): mounts Stripe.js's card field
// into the payment form's #card-element, and lets the form turn the card into a payment
// method. The card goes from this page to Stripe; the shop receives only the method's id.
(function () {
  'use strict';
  var field = document.getElementById('card-element');
  if (!field) return;
  var tries = 0;
  function mount() {
    if (typeof window.Stripe !== 'function') {
      // Stripe.js runs first; should it come late, wait for it (ten seconds at most).
      if (++tries < 200) setTimeout(mount, 50);
      return;
    }
    var stripe = window.Stripe(field.dataset.key);
    var card = stripe.elements().create('card');
    card.mount(field);
    window.onceCardPaymentMethod = function () {
      return stripe.createToken(card).then(function (result) {
        if (result.error || !result.token) {
          var message = result.error && result.error.message;
          throw new Error(message || 'The card was not accepted; please check it.');
        }
        return result.token.card.id;
      });
    };
  }
  mount();
})();
