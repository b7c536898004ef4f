package ui

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/dblockhq/dblock"
)

// tokenHeader carries the page's CSRF token on POST.
const tokenHeader = "X-Dblock-Token"

var crossOrigin = http.NewCrossOriginProtection()

// unlockJSON answers POST unlock.
type unlockJSON struct {
	Key      string `json:"key"`
	Released bool   `json:"released"`
	Owner    string `json:"owner,omitempty"` // who held it
	Token    int64  `json:"token,omitempty"`
	Error    string `json:"error,omitempty"`
}

// unlock breaks the lock on the key of the JSON body {"key": K}, when
// AllowUnlock is on and the request comes from the page: same origin, with
// its token.
func (h *handler) unlock(w http.ResponseWriter, r *http.Request) {
	if !h.cfg.allowUnlock {
		writeJSON(w, http.StatusForbidden, unlockJSON{Error: "force-unlock is off (dblock ui --allow-unlock, ui.AllowUnlock)"})
		return
	}
	if err := h.fromPage(r); err != nil {
		writeJSON(w, http.StatusForbidden, unlockJSON{Error: err.Error()})
		return
	}
	var req struct {
		Key string `json:"key"`
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, unlockJSON{Error: "want a JSON body {\"key\": KEY}: " + err.Error()})
		return
	}
	if err := dblock.ValidateKey(req.Key); err != nil {
		writeJSON(w, http.StatusBadRequest, unlockJSON{Key: req.Key, Error: err.Error()})
		return
	}
	info, err := h.l.ForceUnlockBy(r.Context(), req.Key, h.cfg.by(r))
	h.hub.refresh()
	switch {
	case errors.Is(err, dblock.ErrNotHeld):
		writeJSON(w, http.StatusNotFound, unlockJSON{Key: req.Key, Error: "nothing holds it"})
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, unlockJSON{Key: req.Key, Error: err.Error()})
	default:
		writeJSON(w, http.StatusOK, unlockJSON{Key: req.Key, Released: true, Owner: info.Owner, Token: info.Token})
	}
}

// fromPage checks that r comes from the page this handler served: a JSON
// body, the page's token, and no sign of another origin (Sec-Fetch-Site,
// Origin: net/http's CrossOriginProtection).
func (h *handler) fromPage(r *http.Request) error {
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		return errors.New("want Content-Type application/json")
	}
	if subtle.ConstantTimeCompare([]byte(r.Header.Get(tokenHeader)), []byte(h.token)) != 1 {
		return errors.New("missing or wrong " + tokenHeader + ": reload the page")
	}
	if err := crossOrigin.Check(r); err != nil {
		return fmt.Errorf("cross-origin request refused: %w", err)
	}
	return nil
}
