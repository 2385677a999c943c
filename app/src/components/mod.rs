pub mod cart_lines;
pub mod focus;
pub mod form_error;
pub mod header;
pub mod status_line;
pub mod stepper;
