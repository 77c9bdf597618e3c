mod conformance;
mod offering;
mod plan;
mod snapshots;
