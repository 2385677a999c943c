pub mod checkout;
pub mod home;
pub mod not_found;
pub mod order;
pub mod orders;
