// Package configs embeds the example models' Hugging Face config.json files
// of this folder (see README.md for each one's source), so that the example
// programs' defaults work wherever their binaries run, not only from the
// repository's root.
package configs

import "embed"

// FS holds every *.json file of this folder under its own name
// ("qwen3-0.6b.json", "llama-3.1-8b.json"); the folder's README.md and
// this file are not in it.
//
//go:embed *.json
var FS embed.FS
