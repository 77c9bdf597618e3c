//! llembas-server's suite: the server over real HTTP on 127.0.0.1, chats against the scripted
//! OpenAI-compatible model server (so the real model link runs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
