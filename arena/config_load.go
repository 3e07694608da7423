package arena

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// configFileName is the file LoadConfig reads in a model folder.
const configFileName = "config.json"

// LoadConfig reads and parses the config.json at path or, when path is a
// directory (a model folder, as vLLM takes it), the config.json inside it.
// Symlinks are followed. Errors:
//   - the os error, wrapped, for a path that does not exist or cannot be read;
//   - a *ConfigError wrapping ErrNotRegularFile that names the path and
//     what it is, for a directory without a config.json, a named pipe, a
//     device or a socket: it is refused from its metadata, before it is
//     opened, so a FIFO never blocks and /dev/zero is never read;
//   - a *ConfigError wrapping ErrConfigTooLarge for a file of more than
//     MaxConfigBytes, prefixed with its path: at most MaxConfigBytes+1
//     bytes are ever read;
//   - those of ParseConfig, prefixed with the file's path.
func LoadConfig(path string) (*ModelConfig, error) {
	file, err := configFile(path)
	if err != nil {
		return nil, err
	}
	data, err := readConfigFile(file)
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return cfg, nil
}

// configFile resolves path to the regular file LoadConfig reads: path
// itself, or path/config.json when path is a directory.
func configFile(path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("arena: load config: %w", err)
	}
	if info.IsDir() {
		dir := path
		path = filepath.Join(dir, configFileName)
		info, err = os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return "", notRegularFile(dir, "a directory without a "+configFileName+" in it")
		}
		if err != nil {
			return "", fmt.Errorf("arena: load config: %w", err)
		}
	}
	if !info.Mode().IsRegular() {
		return "", notRegularFile(path, fileKind(info.Mode()))
	}
	return path, nil
}

// readConfigFile reads the regular file at path, at most MaxConfigBytes+1
// bytes of it. It checks the opened file again, in case path was replaced
// after configFile looked at it (the open does not block: openNonBlock).
func readConfigFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openNonBlock, 0)
	if err != nil {
		return nil, fmt.Errorf("arena: load config: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	switch {
	case err != nil:
		return nil, fmt.Errorf("arena: load config: %w", err)
	case !info.Mode().IsRegular():
		return nil, notRegularFile(path, fileKind(info.Mode()))
	case info.Size() > MaxConfigBytes:
		return nil, fmt.Errorf("%s: %w", path, tooLargeInput(info.Size(), true))
	}
	data, err := readAtMost(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return data, nil
}

// readAtMost reads r to its end but never more than MaxConfigBytes+1
// bytes: past MaxConfigBytes it stops with a *ConfigError wrapping
// ErrConfigTooLarge, whatever r holds (a file that grew, an endless stream).
func readAtMost(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("arena: load config: %w", err)
	}
	if len(data) > MaxConfigBytes {
		return nil, tooLargeInput(0, false)
	}
	return data, nil
}

// notRegularFile is the *ConfigError for a path that is not a regular file;
// what says what it is. It names where symlinks led, when they did.
func notRegularFile(path, what string) *ConfigError {
	if real, err := filepath.EvalSymlinks(path); err == nil && real != filepath.Clean(path) {
		path += " (→ " + real + ")"
	}
	return &ConfigError{
		Reason: fmt.Sprintf("%s is %s: pass the model's %s, or the model folder that holds it", path, what, configFileName),
		Err:    ErrNotRegularFile,
	}
}

// fileKind says what a file that is not regular is, for notRegularFile.
func fileKind(m fs.FileMode) string {
	kind := fmt.Sprintf("a special file (mode %v)", m)
	switch {
	case m.IsDir():
		kind = "a directory"
	case m&fs.ModeNamedPipe != 0:
		kind = "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		kind = "a socket"
	case m&fs.ModeCharDevice != 0:
		kind = "a character device"
	case m&fs.ModeDevice != 0:
		kind = "a block device"
	}
	return kind + ", not a regular file"
}
