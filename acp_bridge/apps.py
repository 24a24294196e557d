from django.apps import AppConfig


class AcpBridgeConfig(AppConfig):
    name = "acp_bridge"
