// The login page: POST /api/login, then the console. The session cookie is
// HttpOnly; this page never sees it.
"use strict";

document.getElementById("login-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const error = document.getElementById("login-error");
  error.textContent = "";
  const body = {
    user: document.getElementById("user").value,
    password: document.getElementById("password").value,
  };
  try {
    const response = await fetch("/api/login", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      credentials: "same-origin",
    });
    if (response.ok) {
      window.location.href = "/";
      return;
    }
    const answer = await response.json().catch(() => ({}));
    error.textContent = (answer.error && answer.error.message) || ("login failed: " + response.status);
  } catch (e) {
    error.textContent = "the base station does not answer: " + e;
  }
});
