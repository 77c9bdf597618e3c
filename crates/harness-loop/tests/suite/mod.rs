mod conformance;
mod figure;
mod run;
mod transcript;
