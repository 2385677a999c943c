pub mod add_to_cart;
pub mod cart_count;
pub mod cart_lines;
pub mod form_error;
pub mod header;
pub mod live;
pub mod status_line;
pub mod stepper;
