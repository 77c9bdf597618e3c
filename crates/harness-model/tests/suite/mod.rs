mod client;
mod conformance;
