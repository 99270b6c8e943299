// quarantine UI: progressive enhancements only; every page works without
// this script. Loaded from our own origin (the CSP allows no other).
"use strict";
