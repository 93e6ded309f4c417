"""Registers the credentials moto's STS mints (AssumeRole) as secrets for the leak check: the
bootstrap signs with them and hands their session token around; none may reach a log."""
import leak_registry


def install():
    from moto.sts import models

    inner = models.STSBackend.assume_role

    def assume_role(self, *args, **kwargs):
        role = inner(self, *args, **kwargs)
        leak_registry.register_secret("moto", "moto: assumed role's secret access key", role.secret_access_key)
        leak_registry.register_secret("moto", "moto: assumed role's session token", role.session_token)
        return role

    models.STSBackend.assume_role = assume_role
