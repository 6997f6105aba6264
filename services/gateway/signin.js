// Sign-in for a gateway whose reads need a token (SKYQA_GATEWAY__READ_TOKEN): the token is
// exchanged once for an HttpOnly session cookie, which the page's fetches, images, videos and
// event streams then carry. Loaded before the page's own script.
"use strict";
window.skyqaSignIn = (onDone) => {
  const form = document.getElementById("signin");
  if (!form || !form.hidden) return;
  form.hidden = false;
  form.onsubmit = async (e) => {
    e.preventDefault();
    const token = form.elements.token.value;
    const r = await fetch("/v1/session", { method: "POST", headers: { Authorization: `Bearer ${token}` } });
    if (r.ok) { form.hidden = true; form.elements.token.value = ""; onDone(); }
    else form.elements.token.setCustomValidity("wrong token"), form.reportValidity();
  };
  form.elements.token.oninput = () => form.elements.token.setCustomValidity("");
  form.elements.token.focus();
};
