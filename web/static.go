package web

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/quarantine-dev/quarantine"
)

// assets are the embedded static files, each served at
// /static/NAME.HASH.EXT, where HASH is the start of its content's SHA-256:
// a changed file gets a new URL, so every URL may be cached forever.
type assets struct {
	urls  map[string]string // name -> URL
	files map[string]asset  // URL -> file
}

type asset struct {
	body        []byte
	contentType string
}

var contentTypes = map[string]string{".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8",
	".svg": "image/svg+xml", ".png": "image/png", ".ico": "image/x-icon"}

func loadAssets(fsys fs.FS) (*assets, error) {
	a := &assets{urls: map[string]string{}, files: map[string]asset{}}
	names, err := fs.Glob(fsys, "static/*")
	if err != nil {
		return nil, err
	}
	for _, p := range names {
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, err
		}
		name := path.Base(p)
		ext := path.Ext(name)
		ct, ok := contentTypes[ext]
		if !ok {
			return nil, quarantine.Errorf(quarantine.EINVALID, "web: asset %s: unknown type", name)
		}
		sum := sha256.Sum256(b)
		u := "/static/" + strings.TrimSuffix(name, ext) + "." + hex.EncodeToString(sum[:8]) + ext
		a.urls[name] = u
		a.files[u] = asset{body: b, contentType: ct}
	}
	return a, nil
}

// url returns an asset's URL; a view naming an unknown asset fails to
// render, at the first request of each page (tested).
func (a *assets) url(name string) (string, error) {
	u, ok := a.urls[name]
	if !ok {
		return "", quarantine.Errorf(quarantine.EINVALID, "web: no asset %q", name)
	}
	return u, nil
}

func (a *assets) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f, ok := a.files[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", f.contentType)
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	_, _ = w.Write(f.body)
}
