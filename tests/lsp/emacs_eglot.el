;;; emacs_eglot.el --- drive Emacs + eglot against `kerasfit lsp' in batch mode  -*- lexical-binding: t -*-
;;
;; Loaded after the README's eglot configuration (the test extracts it and loads it as
;; written). Visits $KERASFIT_EMACS_FILE, writes what Flymake shows to
;; $KERASFIT_EMACS_OUT/diagnostics.json, runs the README's fix-all command and writes the
;; buffer to $KERASFIT_EMACS_OUT/fixed.py, then shuts the server down and exits. The test
;; sets $KERASFIT_EMACS_WAIT_FOR (a regexp the awaited diagnostics match) and
;; $KERASFIT_EMACS_FIX_ALL (the README's M-: expression).
;; Anything that goes wrong exits non-zero with the reason on stderr.

(require 'json)
(require 'flymake)
(require 'cl-lib)

(defun kerasfit-test--fail (fmt &rest args)
  (message "kerasfit-emacs-test: %s" (apply #'format fmt args))
  (kill-emacs 3))

(defun kerasfit-test--wait (pred what &optional seconds)
  "Let Emacs read the server's messages until PRED holds."
  (let ((deadline (+ (float-time) (or seconds 60))))
    (while (not (funcall pred))
      (when (> (float-time) deadline)
        (kerasfit-test--fail "timed out waiting for %s" what))
      (accept-process-output nil 0.05))))

(defun kerasfit-test--diag-row (d)
  (let* ((lsp (cdr (assoc 'eglot-lsp-diag (flymake-diagnostic-data d))))
         (beg (flymake-diagnostic-beg d)))
    (save-excursion
      (goto-char beg)
      `((code . ,(plist-get lsp :code))
        (message . ,(plist-get lsp :message))
        (row . ,(line-number-at-pos beg))
        (column . ,(1+ (current-column)))
        (text . ,(flymake-diagnostic-text d))
        (type . ,(symbol-name (flymake-diagnostic-type d)))))))

(let ((file (getenv "KERASFIT_EMACS_FILE"))
      (out (getenv "KERASFIT_EMACS_OUT"))
      (debug-on-error nil))
  (find-file file)
  (unless (eq major-mode 'python-mode)
    (kerasfit-test--fail "%s opened in %s, not python-mode" file major-mode))
  ;; eglot-ensure (from python-mode-hook) connects after the command that visited the
  ;; file; batch mode has no command loop, so run its post-command-hook once.
  (run-hooks 'post-command-hook)
  (kerasfit-test--wait (lambda () (eglot-managed-p)) "eglot to manage the buffer")
  ;; Flymake asks its backends on an idle timer, which batch mode never fires: ask now,
  ;; and again until the server's diagnostics have reached it.
  ;; eglot sends the workspace configuration after didOpen: wait for the diagnostics
  ;; linted with it (one whose text matches $KERASFIT_EMACS_WAIT_FOR).
  (let ((want (getenv "KERASFIT_EMACS_WAIT_FOR")))
    (kerasfit-test--wait
     (lambda ()
       (flymake-start)
       (cl-some (lambda (d) (string-match-p want (flymake-diagnostic-text d))) (flymake-diagnostics)))
     (format "diagnostics matching %S" want)))
  (let ((rows (json-encode (vconcat (mapcar #'kerasfit-test--diag-row (flymake-diagnostics))))))
    (with-temp-file (expand-file-name "diagnostics.json" out)
      (insert rows)))
  ;; The README's fix-everything-safe command ($KERASFIT_EMACS_FIX_ALL), as written.
  (let ((before (buffer-string)))
    (eval (car (read-from-string (getenv "KERASFIT_EMACS_FIX_ALL"))) t)
    (kerasfit-test--wait (lambda () (not (equal before (buffer-string)))) "the fix-all edit" 30))
  (let ((text (buffer-string)))
    (with-temp-file (expand-file-name "fixed.py" out)
      (insert text)))
  (set-buffer-modified-p nil)
  (eglot-shutdown (eglot-current-server))
  (kill-emacs 0))
