from django.contrib import admin
from django.http import JsonResponse
from django.urls import include, path, re_path

from automations.views import webhook_receive

from . import outage
from .api import api


def api_not_found(request, rest: str = "") -> JsonResponse:
    return JsonResponse({"error": "not_found", "detail": "no such API route."}, status=404)


urlpatterns = [
    # Liveness and readiness for load balancers and orchestrators: no login, no details.
    path("healthz", outage.healthz, name="healthz"),
    path("healthz/ready", outage.healthz_ready, name="healthz-ready"),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    re_path(r"^api/(?P<rest>.*)$", api_not_found),
    path("hooks/<int:automation_id>", webhook_receive, name="automation-webhook"),
    path("", include("canvas.ui_urls")),
]

handler400 = "canvas.request_limits.bad_request"
handler500 = "canvas.outage.server_error"  # 503 + Retry-After while Postgres or Redis is down
