mod client;
mod conformance;
mod errors;
mod real_server;
mod settings;
