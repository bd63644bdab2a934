package httpguard

import "net/http"

// Handler serves every request with next and, for a request whose framing
// is ambiguous (AmbiguousFraming), answers with "Connection: close", which
// makes net/http's server close the connection once the response is
// written. Wrap a front's whole handler with it, outside everything else.
func Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if AmbiguousFraming(r) {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// AmbiguousFraming reports whether r is an HTTP/1.x request whose body a
// proxy in front may have framed differently than net/http did: one framed
// by Transfer-Encoding (net/http hides a Content-Length sent with it), or
// an HTTP/1.0 request with a body (net/http hides a Transfer-Encoding sent
// with it). See the package documentation.
func AmbiguousFraming(r *http.Request) bool {
	if r.ProtoMajor != 1 {
		return false
	}
	if len(r.TransferEncoding) > 0 {
		return true
	}
	return r.ProtoMinor == 0 && r.ContentLength != 0
}
