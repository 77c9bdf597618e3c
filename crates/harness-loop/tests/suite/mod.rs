mod conformance;
mod figure;
mod run;
mod snapshots;
mod transcript;
