mod conformance;
mod offering;
mod snapshots;
