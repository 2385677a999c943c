pub mod checkout;
pub mod home;
pub mod order;
pub mod orders;
