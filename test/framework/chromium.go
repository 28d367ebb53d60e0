package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// HeadlessPage says how Headless loads a page.
type HeadlessPage struct {
	// URL is the page.
	URL string
	// Screenshot is the PNG file to write of the window.
	Screenshot string
	// Width and Height are the window's, in pixels.
	Width, Height int
	// ScriptTime is the virtual time the page's scripts get after it
	// loaded, requests they make included, before the DOM and the
	// screenshot are taken.
	ScriptTime time.Duration
}

// Headless loads p in Debian's chromium, headless and in a new empty
// profile, and returns the page's DOM as its scripts left it, with the
// screenshot written. Chromium runs with the flags this machine needs: no
// sandbox (the tests run as root), no GPU, and none of its own network
// traffic (background networking, component updates, sync, QUIC), which a
// closed network refuses.
func Headless(ctx context.Context, p HeadlessPage) (string, error) {
	if _, err := exec.LookPath("chromium"); err != nil {
		return "", fmt.Errorf("chromium: %v (test/scripts/install-deps.sh test installs Debian's chromium)", err)
	}
	profile, err := os.MkdirTemp("", "chromium-profile-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(profile)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "chromium",
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+profile,
		"--window-size="+strconv.Itoa(p.Width)+","+strconv.Itoa(p.Height),
		"--virtual-time-budget="+strconv.FormatInt(p.ScriptTime.Milliseconds(), 10),
		"--screenshot="+p.Screenshot, "--dump-dom", p.URL)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second // its helper processes may hold the output open
	dom, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("chromium %s: %v: %s", p.URL, err, lastLine(stderr.String()))
	}
	if _, err := os.Stat(p.Screenshot); err != nil {
		return "", fmt.Errorf("chromium %s wrote no screenshot: %v: %s", p.URL, err, lastLine(stderr.String()))
	}
	return string(dom), nil
}
