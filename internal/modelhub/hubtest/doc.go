// Package hubtest is a fake Hugging Face hub for tests: a hub server that
// answers the model API and redirects /resolve/ downloads, as the real hub
// does, to a second "CDN" server that serves the bytes with Range support.
// It can also misbehave as a hostile or broken hub would: send no length
// and no end (Endless), drip bytes (DripNext), answer an error of its
// choosing (FailNext). NewInMemory serves both over in-memory connections
// (Client dials them), so a test can run inside a testing/synctest bubble
// and let fake time pass.
package hubtest
