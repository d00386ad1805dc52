// Package embed computes embeddings for the /v1/embeddings endpoint: it
// queues the inputs of concurrent requests, runs them through the model in
// bounded batches (several inputs in one forward pass), and hands each
// request its pooled, L2-normalized vectors.
//
// # Contract
//
//   - Open loads an embedding model: a BERT-family encoder (model.Encoder:
//     nomic-bert, bert) or a decoder whose file sets {arch}.pooling_type
//     (a qwen3 file with last-token pooling, as Qwen3-Embedding). A file
//     without a pooling type is not an embedding model (ErrNotEmbedding).
//     OpenInMemory is Open with the file read into process memory instead
//     of mapped (--mmap=false): the same embeddings.
//   - Service.Embed takes token ids (each input 1..Info.Context tokens),
//     waits its turn and returns one unit-length vector of Info.Dim floats
//     per input, in order. A batch holds at most Config.MaxBatchInputs
//     inputs and Config.MaxBatchTokens tokens; a request larger than a
//     batch spans several. At most Config.MaxQueueInputs inputs wait;
//     beyond that Embed fails at once with ErrQueueFull.
//   - Every call ends: with its vectors, the model's error, ErrClosed
//     after Close, or ctx's error when ctx ends first (its inputs not yet
//     in a batch are dropped, so a cancelled request costs no compute).
//   - Service.Load reports the inputs waiting and those of the batch
//     computing: an embedding worker's load in its /pd/status.
//   - Truncate cuts a vector to its first n dimensions and normalizes it
//     again (Matryoshka embeddings); Info.Dims lists the n a model allows.
//
// Metrics (Register): requests by outcome, inputs, tokens, batches by size
// and request latency, under tandem_embedding_*.
package embed
