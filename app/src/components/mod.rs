pub mod header;
pub mod stepper;
