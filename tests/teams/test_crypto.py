"""Secrets at rest: rotation keeps every value readable; a wrong key set fails loudly."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command

from teams import crypto
from teams.crypto import SecretDecryptionError
from teams.models import Secret
from teams.secrets import secret_create, secret_values_for_team, secrets_rotate

pytestmark = pytest.mark.django_db

KEY_A, KEY_B = Fernet.generate_key().decode(), Fernet.generate_key().decode()


def test_rotation_keeps_every_secret_readable(settings, user, team) -> None:
    settings.CANVAS_SECRET_KEYS = [KEY_A]
    values = {f"KEY_{i}": f"value-number-{i}" for i in range(3)}
    for name, value in values.items():
        secret_create(by=user, team=team, name=name, value=value)
    before = dict(Secret.objects.values_list("name", "ciphertext"))

    settings.CANVAS_SECRET_KEYS = [KEY_B, KEY_A]
    assert secret_values_for_team(team.pk) == values  # the old key still decrypts
    assert secrets_rotate() == 3
    after = dict(Secret.objects.values_list("name", "ciphertext"))
    assert all(after[name] != before[name] for name in values)

    settings.CANVAS_SECRET_KEYS = [KEY_B]
    assert secret_values_for_team(team.pk) == values


def test_a_wrong_key_set_names_the_secret_instead_of_returning_garbage(
    settings, user, team
) -> None:
    settings.CANVAS_SECRET_KEYS = [KEY_A]
    secret_create(by=user, team=team, name="DEPLOY_KEY", value="hunter2-but-longer")
    settings.CANVAS_SECRET_KEYS = [KEY_B]
    with pytest.raises(SecretDecryptionError) as caught:
        secret_values_for_team(team.pk)
    message = str(caught.value)
    assert "'DEPLOY_KEY'" in message
    assert "cannot be decrypted with the configured CANVAS_SECRET_KEYS" in message
    assert "hunter2" not in message
    with pytest.raises(SecretDecryptionError):
        secrets_rotate()


def test_rotate_secrets_command(settings, user, team, capsys) -> None:
    settings.CANVAS_SECRET_KEYS = [KEY_A]
    secret_create(by=user, team=team, name="TOKEN", value="some-long-value")
    settings.CANVAS_SECRET_KEYS = [KEY_B, KEY_A]
    call_command("rotate_secrets")
    assert "re-encrypted 1 secret(s)" in capsys.readouterr().out
    settings.CANVAS_SECRET_KEYS = [Fernet.generate_key().decode()]
    with pytest.raises(CommandError, match="'TOKEN'.*cannot be decrypted"):
        call_command("rotate_secrets")


def test_without_configured_keys_a_key_is_derived_from_secret_key(settings) -> None:
    settings.CANVAS_SECRET_KEYS = []
    token = crypto.encrypt("plain value")
    assert crypto.decrypt(token, name="X") == "plain value"
    assert Fernet(crypto.derived_key(settings.SECRET_KEY)).decrypt(token) == b"plain value"
    settings.SECRET_KEY = "another-secret-key"
    with pytest.raises(SecretDecryptionError):
        crypto.decrypt(token, name="X")


def test_a_malformed_key_is_a_configuration_error_that_does_not_echo_it(settings) -> None:
    settings.CANVAS_SECRET_KEYS = [KEY_A, "not-a-fernet-key-at-all"]
    with pytest.raises(ImproperlyConfigured) as caught:
        crypto.encrypt("x")
    assert "key #2" in str(caught.value)
    assert "not-a-fernet-key" not in str(caught.value)
