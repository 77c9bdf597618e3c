-- The search index (issue 18): per root, one row a file (its content hash: an unchanged file is
-- not cut again) and one a piece (its text's hash: an unchanged piece keeps its vector).
-- Vectors are the little-endian f32s of the embedding, NULL without the embedder.
CREATE TABLE search_files (
    root TEXT NOT NULL,
    path TEXT NOT NULL,
    hash TEXT NOT NULL,
    by_tokens BIGINT NOT NULL,
    PRIMARY KEY (root, path)
);

CREATE TABLE search_pieces (
    root TEXT NOT NULL,
    path TEXT NOT NULL,
    ordinal BIGINT NOT NULL,
    hash TEXT NOT NULL,
    start_line BIGINT NOT NULL,
    end_line BIGINT NOT NULL,
    text TEXT NOT NULL,
    vector BYTEA,
    PRIMARY KEY (root, path, ordinal)
);
