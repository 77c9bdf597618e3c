mod client;
mod conformance;
mod errors;
