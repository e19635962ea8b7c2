//! Sign-up, sessions, waitlist, profile and GDPR (filled in by the onboarding work).
