// Package modelhub pulls GGUF model files from the Hugging Face hub (or a
// mirror) into a local, content-addressed cache, and maps hub references to
// the cached files. It is what tandem pull, tandem models and a hub reference
// given to --model run; cmd/tandem hands the blob path to model.Load, so
// nothing in the serving path depends on it.
//
// # API
//
// References (ParseRef): hf.co/ORG/REPO[:QUANT] and
// huggingface.co/ORG/REPO[:QUANT] (ollama's form, with or without https://),
// the short ORG/REPO[:QUANT] (IsShortRef: one slash between two valid
// names, the first not a hub host, the name not ending in .gguf; it reads as
// a relative path too, so callers look for a file first and a path that
// exists wins), and file URLs
// https://huggingface.co/ORG/REPO/resolve/REV/FILE.gguf (a
// /blob/ page URL means its /resolve/ twin; a URL on the $HF_ENDPOINT host is
// accepted too). Hub: Endpoint (FromEnv: $HF_ENDPOINT, default
// https://huggingface.co), Token ($HF_TOKEN), Dir (DefaultDir: $TANDEM_HOME,
// else tandem under the user cache folder, ~/.cache/tandem on Linux), Client,
// Logger, Progress callback. Pull(ctx, ref) asks the hub and downloads if
// needed; Resolve(ctx, ref) returns a cached entry without any request, else
// pulls; Lookup(ref) is the cache alone; List() every entry; Remove(ref)
// deletes a manifest and its blob once no other manifest names it. An Entry:
// reference, repo, revision, file, size, sha256, pulled-at time, blob path.
// SelectFile is the file choice alone.
//
// Requests: GET {endpoint}/api/models/ORG/REPO?blobs=true (/revision/REV for
// another revision) lists siblings[].rfilename and their sizes (lfs.size, else
// size); GET {endpoint}/ORG/REPO/resolve/REV/FILE answers a redirect to the
// CDN with the checksum in X-Linked-Etag (else ETag) and the length in
// X-Linked-Size.
//
// # Cache
//
// The cache layout under Dir:
//
//	blobs/sha256-<hex>               verified file contents, named by their sha256
//	partial/sha256-<hex>.partial     an interrupted download, named by the checksum the hub announced
//	manifests/<escaped ref>.json     one per reference: {reference, repo, revision, file, size, sha256, pulled_at}
//
// The manifest's name is the canonical reference (Ref.String, e.g.
// hf.co/org/repo:Q4_K_M) with every byte other than letters, digits, ., - and
// _ written as %XX.
//
// # Invariants
//
//   - File choice: .gguf files that are not mmproj projectors; :QUANT matches
//     the tag case-insensitively as a whole word (Q4_K does not match Q4_K_M,
//     Q4_0 not IQ4_0); no tag picks Q4_K_M, else the only GGUF. No match,
//     several matches, no GGUF at all, or a split GGUF (-00001-of-00003.gguf)
//     is an error that lists the repository's GGUF files and the tags that
//     pick them.
//   - The token goes only to the endpoint's scheme and host (port included);
//     the Hub follows redirects itself, so a CDN never sees it. Checksums are
//     taken only from the hub's own answers, never from the CDN.
//   - Every byte written is verified: the sha256 from the hub for LFS files
//     (all GGUF files on the hub are), or the git blob id (sha1("blob N\0" +
//     content)) for a small non-LFS file. A mismatch deletes the partial file,
//     writes no blob and no manifest. A download with no checksum is refused.
//   - Resumption: an interrupted download (cut connection, stall, Ctrl-C)
//     keeps its partial file; the next pull sends Range: bytes=N-, checks the
//     206 answer's Content-Range start, and hashes the kept bytes plus the new
//     ones. A 200 answer starts over from zero; a Content-Range that does not
//     fit deletes the partial.
//   - A verified file is synced and renamed into blobs/ (atomic); manifests
//     are written to a temporary file and renamed. Content already in blobs/
//     is never downloaded again, whichever reference names it: Pull then makes
//     only the listing and resolve requests to the hub and none to the CDN;
//     Resolve of a cached reference makes none.
//   - Errors say what to do: 401/403 set HF_TOKEN (the hub answers 401 for
//     missing repositories too, so also check the name), 404 check the
//     repository, revision and file names, 429 wait or sign in; a network
//     error names the URL.
//   - What the hub says is shown, never obeyed: file names, its error messages
//     and status text reach errors and Progress.File through Printable
//     (control characters, Unicode format characters, line separators, bytes
//     that are not UTF-8 and the backslash written as Go escapes: \x1b,
//     \u202e), its messages cut to 300 bytes, and a list of candidate files to
//     the first 20 and a count. Entry.File keeps the name as it is (the
//     manifest records it); tandem pull and tandem models print it through
//     Printable.
//
// # Retries
//
// Within one Pull, a download the network cuts (reset connection, a body short
// of its length, a stall, a 500/502/503/504 answer) is tried again up to
// Retries times (default 5, $TANDEM_PULL_RETRIES, 0 none), after RetryWait (1
// s) doubled each time up to 30 s, asking the hub afresh and resuming from the
// partial file with Range; too slow a download, the deadline (Timeout bounds
// all attempts together), a checksum mismatch, a 4xx and a cancelled pull are
// not retried.
//
// # Limits
//
// MaxRedirects 10; MaxAPIBytes 32 MiB of listing JSON; a download that
// receives nothing for StallTimeout (default 60 s), fewer than MinRateBytes
// (256 KiB) in a RateWindow (30 s: a drip of bytes), or is not done after
// Timeout (default 6 h, $TANDEM_PULL_TIMEOUT) stops, keeping its partial file,
// and the next pull resumes; more bytes than the announced length delete the
// partial. The length is the hub's (X-Linked-Size, else the listing's size for
// the file), whatever its value; when the hub announces none, a download takes
// at most MaxBytes (default 50 GiB, $TANDEM_PULL_MAX_BYTES, e.g. 60G: the hub
// holds no file over 50 GB, bigger GGUFs are split), so a CDN length above it
// is refused at once and a body without one is cut there and its partial
// deleted. Manifests over 64 KiB are refused. Two processes pulling the same
// file at the same moment are not coordinated (no lock file): their appends to
// one partial file make the checksum fail, which deletes it, and running the
// pull again fixes it; tandem up resolves the reference once before starting
// workers for that reason. Split GGUFs are not loaded.
package modelhub
