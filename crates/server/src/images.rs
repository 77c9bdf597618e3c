//! Images sent with a message (issue 34): files of the person's view (attached or pasted in the
//! composer, which uploads them to their home first), read through the view and sent to the
//! model inline. A chat on this server sends them only to a model whose metadata says it reads
//! images; a device chat passes them to the device, whose agent decides the same by its own
//! model's metadata. Also the image types the pages show inline ([`file_type`]).

use harness_fs::VPath;

use crate::App;
use crate::auth::User;
use crate::error::{Error, Result};

/// The most images one message carries.
pub const MAX_IMAGES: usize = 8;
/// The largest image sent, in bytes (the model APIs' own limits are about this size).
pub const MAX_IMAGE_BYTES: usize = 8 << 20;
/// The image types the model APIs read (of those the pages show inline, [`file_type`]).
const TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// The raster image types a page may show inline: none of them can carry a script.
const INLINE_IMAGES: [(&str, &str); 7] = [
    ("png", "image/png"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("gif", "image/gif"),
    ("webp", "image/webp"),
    ("avif", "image/avif"),
    ("bmp", "image/bmp"),
];

/// Other types a download is sent as (anything else is `application/octet-stream`).
const DOWNLOAD_TYPES: [(&str, &str); 5] = [
    ("pdf", "application/pdf"),
    ("txt", "text/plain; charset=utf-8"),
    ("md", "text/plain; charset=utf-8"),
    ("json", "application/json"),
    ("zip", "application/zip"),
];

/// A file's type by its name's extension, and whether it may be shown inline.
pub fn file_type(name: &str) -> (&'static str, bool) {
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    if let Some((_, t)) = INLINE_IMAGES.iter().find(|(e, _)| *e == ext) {
        return (t, true);
    }
    let t = DOWNLOAD_TYPES.iter().find(|(e, _)| *e == ext);
    (t.map_or("application/octet-stream", |(_, t)| t), false)
}

/// One image read for a message.
#[derive(Debug, Clone)]
pub struct Image {
    /// Where it is in the person's view (the page shows it from there).
    pub path: String,
    /// Its type (`image/png`).
    pub mime: &'static str,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

impl Image {
    /// Its bytes in base64, as ACP's image block carries them.
    pub fn base64(&self) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(&self.bytes)
    }

    /// As a `data:` URL, the way a model's request carries it.
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.mime, self.base64())
    }
}

/// Reads the images `paths` name in `user`'s view (none: nothing is read). Refused: too many,
/// a type a model does not read, one too large, one the view does not show.
pub async fn read(app: &App, user: &User, paths: &[String]) -> Result<Vec<Image>> {
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    if paths.len() > MAX_IMAGES {
        return Err(Error::BadRequest(format!(
            "{} images: a message carries at most {MAX_IMAGES}",
            paths.len()
        )));
    }
    let view = crate::world::user_view(&app.pool, &app.backend, user.id, &user.username).await?;
    let paths = paths.to_vec();
    tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        for raw in paths {
            let p: VPath = view.resolve(&raw);
            let (kind, _) = file_type(p.name());
            let Some(mime) = TYPES.into_iter().find(|t| *t == kind) else {
                return Err(Error::BadRequest(format!(
                    "{p} is not an image a model reads (PNG, JPEG, GIF or WebP)"
                )));
            };
            let bytes = view.read_bytes(&p)?;
            if bytes.len() > MAX_IMAGE_BYTES {
                return Err(Error::TooLarge(format!(
                    "{p} is {} bytes: an image sent is at most {MAX_IMAGE_BYTES}",
                    bytes.len()
                )));
            }
            out.push(Image {
                path: p.to_string(),
                mime,
                bytes,
            });
        }
        Ok(out)
    })
    .await
    .map_err(|e| Error::Stored(format!("reading images: {e}")))?
}

/// Refuses images for a model that does not read them (its metadata says so).
pub fn check_vision(model: &harness_model::metadata::ModelInfo, images: &[Image]) -> Result<()> {
    match model.unread_images() {
        Some(why) if !images.is_empty() => Err(Error::BadRequest(format!(
            "{why}: send the message without them, or pick a model that reads images"
        ))),
        _ => Ok(()),
    }
}
