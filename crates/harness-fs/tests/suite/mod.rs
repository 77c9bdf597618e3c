mod conformance;
mod host;
mod tools;
