mod atomic;
mod conformance;
mod host;
mod tools;
